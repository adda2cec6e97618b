/* Debian's libsqlite3-dev, for the SQLite peer benchmark (Benchmarks/run.sh installs it). */
#include <sqlite3.h>
