python3 bench/pytorch_step.py --device cuda --model gpt2-small --batch-size 16 --seq-len 1024 --precision bf16 --steps 20 --warmup 5 --json gpt2_small_torch_eager_2.json
