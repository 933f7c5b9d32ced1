"""The trtexec backend: builds and times engines with the trtexec command, parsing its logs and exports."""
