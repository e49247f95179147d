sublet train --model resnet50 --data synthetic --synthetic-shape 3x224x224 --batch-size 256 --limit-train 2560 --limit-test 512 --epochs 1 --memory-budget 10GiB
