# Sourced by the checks that open pages in a browser: Debian's chromium and npm's
# playwright-core (in .tools/node, git-ignored), each installed once per machine. Sets
# NODE_DIR, where the checks' node scripts are copied to run beside playwright-core.
if [ ! -x /usr/bin/chromium ]; then
    (apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium)) >/dev/null
fi
NODE_DIR=.tools/node
if [ ! -d "$NODE_DIR/node_modules/playwright-core" ]; then
    mkdir -p "$NODE_DIR"
    (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund playwright-core@1 >/dev/null)
fi
