"""A minimal OTLP/gRPC trace collector for bench/ops.sh: accepts every
export, counts the spans, prints the count on SIGTERM. Needs the PyPI
packages opentelemetry-proto and grpcio.

    python3 bench/otlp_sink.py PORT
"""
import signal
import sys
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

spans = 0


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        global spans
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                spans += len(ss.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Sink(), server)
server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
server.start()


def stop(*_):
    print(spans, flush=True)
    server.stop(0)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
server.wait_for_termination()
