"""The Gradio browser UI of Metagen Studio (`metagen ui`)."""
