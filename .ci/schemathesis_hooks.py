"""schemathesis hooks for .ci/schemathesis: document batches are NDJSON
(`application/x-ndjson`), text that schemathesis sends like `text/plain`."""

import schemathesis

schemathesis.serializer.alias("application/x-ndjson", "text/plain")
