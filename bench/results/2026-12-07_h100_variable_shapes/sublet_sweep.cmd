build/sublet bench step --device cuda --model gpt-mini --block-size 1024 --precision bf16 --vocab 50304 --shape-schedule shapes.json --warmup 3 --steps 60 --alloc-conf-sweep --json sublet_sweep.json
