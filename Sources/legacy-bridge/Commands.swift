// Placeholder command table; each command lives in its own file once its library pieces exist.
