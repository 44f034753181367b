"""`python -m modelport.cli`."""

from modelport.cli import main

raise SystemExit(main())
