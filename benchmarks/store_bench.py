"""Store benchmark: append throughput and search latency (see memstrata.bench.store)."""

from memstrata.bench.store import main

if __name__ == "__main__":
    main()
