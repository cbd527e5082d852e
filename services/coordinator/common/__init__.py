"""Settings, errors and security helpers of the coordinator."""
