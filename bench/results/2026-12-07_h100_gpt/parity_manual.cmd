SUBLET_PARITY_DEVICE=cuda SUBLET_PARITY_ATTENTION=manual SUBLET_TORCH_PYTHON=/opt/torch/.venv/bin/python build/tests/models/test_gpt_torch_parity
