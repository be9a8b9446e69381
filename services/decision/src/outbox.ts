// The outbox is the runtime's (one socket write per event-loop turn); the route path imports it from here.
export { Outbox } from '@vantage/runtime';
