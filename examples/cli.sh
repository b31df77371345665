frost demo --seq 128 --head-dim 96                          # other shapes; --device cpu or cuda (default: cuda if any)
frost probe examples/gpt_oss_layer.json --target sm_120     # can sm_120 serve this graph (any engine)? exit 0 yes, 1 no, 2 bad input
frost probe examples/gpt_oss_layer.json --target sm_120 --engine cute_sm120   # ... on a GPU kernel, not the reference
frost probe examples/gpt_oss_layer.json --json              # this machine; the report as JSON
frost support-matrix                                        # what each engine serves, to stdout (--output FILE writes it)
frost --version                                             # the installed version
frost schema                                                # the graph JSON schema
frost cache                                                 # the on-disk kernel and report cache (--prune, --clear)
frost bench --suite standard --ceiling --out bench          # GPU only: frost's backward against its peers, in one process
frost bench --suite standard --pass forward,step --out bench # GPU only: the forward, and a step (forward + backward)
frost bench --suite full --pass all --peer-smem padded --ceiling --out docs/bench   # GPU only: every row of docs/
frost bench --suite standard --peer-smem padded --out bench-padded # GPU only: FA4 launched at SM120 occupancy, as frost is
