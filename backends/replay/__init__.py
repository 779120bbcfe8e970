"""Model calls recorded as data and answered again: `calls` (canonical requests, results as JSON, the recording
wrapper) and `backend` (ReplayBackend, which answers from a recording)."""
