"""The REST service: FastAPI on uvicorn, mirroring the proto contract over the shared core."""
