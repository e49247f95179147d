build/sublet replay --rules pytorch snapshots/pytorch.pickle.gz --json replay_pytorch.json
