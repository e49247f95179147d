build/sublet bench step --device cuda --model gpt2-small --batch-size 16 --seq-len 1024 --precision bf16 --steps 20 --warmup 5 --cuda-graph --memory-plan static --json gpt2_small_sublet_graph_3.json
