/**
 * Registers a whole service implementation. `router.service` takes a `Partial` one, so a method
 * left out compiles and answers UNIMPLEMENTED; this takes the full `ServiceImpl`, so an RPC added
 * to the proto fails to compile until every server of it handles it (docs/extending.md).
 */
import type { DescService } from '@bufbuild/protobuf';
import type { ConnectRouter, ServiceImpl } from '@connectrpc/connect';

export function serveService<S extends DescService>(router: ConnectRouter, service: S, implementation: ServiceImpl<S>): void {
  router.service(service, implementation);
}
