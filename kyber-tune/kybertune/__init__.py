"""kyber-tune: find, recommend and keep Kyber's latency targets
(read_lat_nsec, write_lat_nsec) for a device and workload.  See
kyber-tune/README.md and `kyber-tune/kyber-tune --help`."""
