"""Where models come from: GGUF files and their headers, the bundled model, pulls from the Hugging Face Hub, and the
CPU weights choice (quantised copies and their measurements)."""
