import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      '**/dist/**',
      'build/**',
      'node_modules/**',
      'examples/*/node_modules/**',
      'infra/**',
      'coverage/**',
      'packages/executor/.tshy-build/**',
    ],
  },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.property.name='only']", message: 'Focused tests hide the rest of the suite.' },
      ],
    },
  },
  {
    // Type-checked rules where a kit built on timers and a plane built on callbacks need them: a promise nobody
    // awaits or catches, or one handed to something that expects a plain callback, loses its errors.
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    // Production code reads as its steps: a function longer than this says why beside it, with
    // `// eslint-disable-next-line max-lines-per-function -- <reason>`. Tests and benches are scripts of steps
    // already; they are not held to it.
    files: ['shared/**/*.ts', 'functions/**/*.ts', 'cli/**/*.ts', 'scripts/**/*.ts', 'packages/*/src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true }] },
  },
  {
    // The CommonJS example app: written as a CommonJS user writes it.
    files: ['examples/queue-worker/**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
