"""What runs the house rather than a call: settings (`config`), queue and actor names,
timestamps, what one release reads of another's, outages, cost, traces, where Redis is, and
the envelopes the queues carry."""
