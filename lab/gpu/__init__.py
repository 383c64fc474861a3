"""The GPU harness: what travels to the device machine (`pack`), the run there (`python -m lab.gpu run`: `orchestrate`
starting each of `parts`), and its record here (`tables`); `common` holds what they share. `__main__` says what each
part measures."""
