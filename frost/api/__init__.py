"""frost's public face, one path for dense and packed calls (the layout is an argument, not a twin):

- arguments.py: the gate every public call passes first (types, then values; frost.spec declares the options);
- checks.py: a call's tensors checked in the caller's terms;
- calls.py: one functional forward / backward over a plan; functional.py: frost.sdpa_forward / sdpa_backward and
  their varlen twins; autograd.py: frost.attention / attention_varlen and their torch custom ops;
- plans.py: frost.compile and detect_target; support.py: frost.check_support.

Importing this package imports no torch; its modules do."""
