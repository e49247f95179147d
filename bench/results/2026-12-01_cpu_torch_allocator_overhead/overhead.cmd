build/torch_allocator/torch_allocator_overhead --pairs 200000 --json overhead.json
