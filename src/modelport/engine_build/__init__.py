"""Making llama.cpp for the CPU it runs on: started by `modelport serve` in the background, or by
`modelport engine build`. Where builds live and which one a process runs is the runtime's
(`modelport.engines.llamacpp.cpu_builds`); this package is never imported by a serving process but to
start or steer a build.

PyPI's xllamacpp wheel is a portable build (AVX2, GCC 10) so that it runs on any x86-64 Linux; the same
llama.cpp compiled here for the instruction sets this CPU lists (this machine's compiler) decodes faster
(docs/benchmarks.md). The build also makes the source edits in `patches` (each with its reason): one is
what lets speculation be on by default in this build and not on the wheel. A build takes minutes (7 to
12 on 2 cores), so `modelport serve` does not wait for one: it serves on the wheel at once, builds beside
it at idle priority (`SCHED_IDLE`: the build gets only CPU time nothing else wants) and paused while the
server answers, and its next start runs the build.

A build lives outside the virtual environment, in `<cache>/engine/<key>/`: the key names the xllamacpp
version, the recipe (`cpu_builds.RECIPE`: a build made the old way is made anew), the machine and a hash
of the CPU's feature flags, so a cache copied to another CPU is not used there (an instruction that CPU
lacks would kill the process). Its `site/` goes first on `sys.path` before xllamacpp is imported. It
counts only once `engine.json` is written, after a process of its own has loaded it and generated with
it. Its sources stay in `work/` until then, so a build stopped with its server goes on from where it was
at the next start. Sources come from the package index only (xllamacpp's sdist; llguidance, the grammar
engine tools and JSON outputs use, linked from its wheel rather than built with Cargo, which would fetch
from GitHub and crates.io).
"""
