sublet bench step --device cuda --steps 30 --warmup 5 --model resnet50 --input 3x224x224 --classes 1000 --batch-size 64
