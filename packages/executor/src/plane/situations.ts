/**
 * The repair situation the plane shares with the kit's app helpers: the fork planner of a diverged workflow.
 * Apart from index.ts so that repair's primitives, which import index.ts, never reach a situation through it.
 * @module
 */

export * from '../repair/situations/divergedPlan.js';
