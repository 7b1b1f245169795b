"""Run the miniature stand-in of the paper pipeline end to end (issue 6's proof of the DAG).

Writes miniature versions of every file of DPR's resource map and SQuAD v1.1 (dcsr.fixtures.mini), lays
them out as DPR's and SQuAD's sites, serves them from 127.0.0.1 (dcsr.fixtures.httpserve), and runs
Snakemake over config/paper.yaml + config/paper-mini.yaml in its own folder, with the server's
address as downloads.base_url: the real download rule fetches them like the real files.

    python workflow/scripts/run_paper_mini.py [--workdir paper-mini] [--overlay config/paper-mini-ci.yaml] [-- <snakemake options>]
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from dcsr.cli import script
from dcsr.fixtures.httpserve import serve
from dcsr.fixtures.mini import write_paper_mini
from dcsr.pipeline.resources import lay_out_site

REPO = Path(__file__).resolve().parents[2]


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="paper-mini", help="the run's folder (results, downloads, .snakemake)")
    ap.add_argument("--seed", type=int, default=13, help="seed of the miniature files")
    ap.add_argument("--overlay", action="append", default=[], type=Path,
                    help="a further config overlay after paper-mini.yaml (e.g. config/paper-mini-ci.yaml); repeatable")
    ap.add_argument("snakemake_args", nargs="*", help="passed to snakemake (after --), default --cores all")
    a = ap.parse_args()
    work = Path(a.workdir).resolve()
    site = work / "site"
    if not site.is_dir():  # the files are deterministic: made once per folder
        files = work / "files"
        write_paper_mini(files, seed=a.seed)
        tmp = work / ".site.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        lay_out_site(files, tmp)
        tmp.rename(site)
    with serve(site) as url:
        overlay = work / "server.yaml"
        overlay.write_text(yaml.safe_dump({"downloads": {"base_url": f"{url}/dpr/", "squad_base_url": f"{url}/squad/"}}))
        print(f"serving the miniature files at {url}", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
               "--configfile", str(REPO / "config" / "paper.yaml"), str(REPO / "config" / "paper-mini.yaml"),
               *(str(o.resolve()) for o in a.overlay), str(overlay), *(a.snakemake_args or ["--cores", "all"])]
        sys.exit(subprocess.run(cmd).returncode)


if __name__ == "__main__":
    main()
