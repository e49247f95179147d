sublet bench step --device cuda --steps 30 --warmup 5 --model resnet18 --input 3x32x32 --classes 10 --batch-size 512 --cuda-graph --memory-plan cached
