// Lint set: type-aware rules that catch floating and misused promises, import
// cycles across the workspace (packages must form a DAG), and deep imports across
// packages (each package is imported only as `@vantage/<name>`, its entry file).
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const DEEP_IMPORT = 'Import another package only as @vantage/<name> (its src/index.ts); export what you need from there.';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '.infra/**', '**/dist/**', 'out/**', 'coverage/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts'],
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: 'tsconfig.json' })],
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/await-thenable': 'error',
      'import-x/no-cycle': ['error', { maxDepth: 10, ignoreExternal: true }],
      // `@vantage/x/src/...` and any other path below a package's name.
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              // The other entries packages declare are test tooling for what only tests write (in their
              // package.json exports): wire's encoders (`@vantage/wire/test/encode`) and discovery's file
              // layout (`@vantage/discovery/test/file-layout`), for tests and benchmarks.
              regex: '^@vantage/(?!wire/test/encode$|discovery/test/file-layout$)[^/]+/',
              message: DEEP_IMPORT,
            },
          ],
        },
      ],
      // A relative path that climbs into another package (found by resolving it, which a
      // pattern cannot do: `../../src/x` is fine from a package's test/fixtures/, not from its test/).
      'import-x/no-relative-packages': 'error',
    },
  },
  {
    // Product source never imports test tooling.
    files: ['**/src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@vantage/*/**'], message: DEEP_IMPORT },
          ],
        },
      ],
    },
  },
);
