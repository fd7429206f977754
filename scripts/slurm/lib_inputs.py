# Prints the config's [inputs] paths, one per line (used by the sbatch templates; Python >= 3.11).
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    config = tomllib.load(f)
for p in config.get("inputs", {}).get("paths", []):
    print(p)
