pip install -e ".[transformers,bench]"                                        # transformers and matplotlib
python3 examples/train_gpt_oss_tiny.py --tiny --device cpu --steps 20         # frost vs eager: losses, tokens/s, loss.png
