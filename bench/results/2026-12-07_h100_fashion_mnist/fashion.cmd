build/sublet train --device cuda --data fashion-mnist --cuda-graph --metrics-json fashion.json
