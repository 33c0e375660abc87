"""The catalog of CUDA entry points and ZLUDA coverage per release, the verdict, and the observations store."""
