export { REPO_ROOT, INFRA_DIR } from './paths';
export { freePort, httpOk, tcpOpen, waitFor, processCpuUs, endAtExit, forgetAtExit } from './exec';
export { ensureNatsServer } from './install';
export { natsBroker, kafkaBroker, etcdServer } from './brokers';
export type { NatsBroker, KafkaBroker, EtcdServer, NatsOptions } from './brokers';
export { Stack } from './stack';
export { runJob, defaultJobConfig, calibrationParameterSet, writeParameterSet, waitForParameterSet, runNode } from './job';
export type { JobConfig, JobContext, JobResult } from './job';
export { startMocker, startDynamoDriver, spawnDynamoPython, untilReady, lineRpc } from './dynamo';
export type { MockerProcess, DynamoDriver, DynamoProcess } from './dynamo';
export {
  ensureTlsMaterial,
  randomSecret,
  rolePermissions,
} from './secure';
export type {
  KafkaSecurity,
  RolePermissions,
  SecurePool,
  TlsMaterial,
} from './secure';
