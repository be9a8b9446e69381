// A tiny typed builder for JSON Schema: each builder returns a plain JSON Schema object (what ajv
// compiles) carrying a phantom TypeScript type, so a configuration shape is written once. Every
// object has `additionalProperties: false`; a property without a `default` is `required`; an object
// whose properties all have defaults gets `default: {}`, so after validation (ajv `useDefaults`)
// nothing is missing and `Static<S>` has no optional fields.

declare const phantom: unique symbol;

/** JSON Schema node carrying the TypeScript type of the value it validates. */
export type TSchema<T> = JsonSchema & { readonly [phantom]?: T };

/** The static type a schema validates (after defaults are applied). */
export type Static<S> = S extends TSchema<infer T> ? T : never;

export interface JsonSchema {
  type?: 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'object';
  enum?: readonly unknown[];
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean;
  required?: string[];
  items?: JsonSchema;
  minItems?: number;
  minLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
}

export type ObjectSchema<P extends Record<string, TSchema<unknown>>> = TSchema<{ [K in keyof P]: Static<P[K]> }> & {
  type: 'object';
  properties: P;
};

/** Deeply readonly view: what `loadConfig` returns (the value is also frozen at runtime). */
export type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

interface Common<T> {
  default?: T;
}

export const s = {
  string(opts: Common<string> & { minLength?: number; pattern?: string } = {}): TSchema<string> {
    return { type: 'string', ...opts };
  },
  integer(opts: Common<number> & { minimum?: number; maximum?: number } = {}): TSchema<number> {
    return { type: 'integer', ...opts };
  },
  number(opts: Common<number> & { minimum?: number; maximum?: number } = {}): TSchema<number> {
    return { type: 'number', ...opts };
  },
  boolean(opts: Common<boolean> = {}): TSchema<boolean> {
    return { type: 'boolean', ...opts };
  },
  /** One of a fixed set of strings. */
  enum<const V extends readonly string[]>(values: V, opts: Common<V[number]> = {}): TSchema<V[number]> {
    return { type: 'string', enum: [...values], ...opts };
  },
  array<T>(items: TSchema<T>, opts: Common<T[]> & { minItems?: number } = {}): TSchema<T[]> {
    return { type: 'array', items, ...opts };
  },
  object<P extends Record<string, TSchema<unknown>>>(properties: P): ObjectSchema<P> {
    const required = Object.keys(properties).filter((k) => !('default' in (properties[k] as JsonSchema)));
    const node: JsonSchema = { type: 'object', properties, additionalProperties: false };
    if (required.length > 0) node.required = required;
    else node.default = {};
    return node as ObjectSchema<P>;
  },
  /** `base` plus more properties (a service's section on top of the common base). */
  extend<B extends Record<string, TSchema<unknown>>, P extends Record<string, TSchema<unknown>>>(
    base: ObjectSchema<B>,
    properties: P,
  ): ObjectSchema<Omit<B, keyof P> & P> {
    return s.object({ ...base.properties, ...properties } as Omit<B, keyof P> & P);
  },
};
