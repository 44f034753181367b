"""What the tests (and the benchmarks) share: servers started and stopped within deadlines (`live`), both
faces of one service (`faces`), a PostgreSQL server (`postgres`), and small configurations (`configs`)."""
