#!/usr/bin/env bash
# Why a connection closes at overload: main with grpc-go's own log at info level on the
# server (GRPC_GO_LOG_SEVERITY_LEVEL=info, verbosity 2), which names the reason a server
# transport closes, at twice capacity (as round1.sh).
export OUT=/tmp/s26/cap API=public LEASEFLAG= GFLAGS=--retry-resource-exhausted GEN=/tmp/s26/main
printf '#!/bin/sh\nGRPC_GO_LOG_VERBOSITY_LEVEL=2 GRPC_GO_LOG_SEVERITY_LEVEL=info exec /tmp/s26/main "$@"\n' > /tmp/s26/grpclog
chmod +x /tmp/s26/grpclog
for r in ${ROUNDS:-1 2 3}; do
../2026-11-28-session24/capx.sh /tmp/s26/grpclog pub-grpclog$r c8000:2.5s:100s
done
