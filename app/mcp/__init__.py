"""The MCP door: every workflow as a tool of a Model Context Protocol server (stdio and streamable HTTP)."""
