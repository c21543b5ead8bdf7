#!/usr/bin/env bash
# Installs what the browser tests (pytest -m browser) need: Debian's Chromium and its
# driver, and selenium in the project's venv. Nothing is downloaded outside the package
# registries: selenium is pointed at /usr/bin/chromedriver, never at its own driver manager.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1 || [ ! -x /usr/bin/chromedriver ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
fi

if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import selenium" 2>/dev/null; then
    .venv/bin/pip install -q "selenium>=4.15"
fi
echo "browser ready: $(chromium --version 2>/dev/null || echo 'chromium missing')"
