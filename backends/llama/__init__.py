"""llama.cpp: the studio's side at this level (the engine worker client, devices, the build canary), what runs in an
engine worker process in worker/, and where models come from (files, the Hub, CPU weights) in models/."""
