// @vantage/gateway-client: the gateway's side of the route protocol. See README.md.
export { GatewayClient, RouteError } from './client';
export type { CandidatePrompt, GatewayClientOptions, Placement, PoolSpec, RouteArgs, RouteErrorKind } from './client';
