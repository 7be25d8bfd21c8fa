DROP TABLE IF EXISTS sendstream_bench.baseline_insert
