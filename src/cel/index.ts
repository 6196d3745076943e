// The spec's CEL environment: compile once at translation time, evaluate per request.
export {
  type CelActivation,
  type CelEnvironment,
  type CelEnvironmentOptions,
  type CelPosition,
  type CelProblem,
  type CompiledExpr,
  type CompileResult,
  compileExpression,
  createCelEnvironment,
  type EvalResult,
  evaluate,
  MAX_EXPRESSION_LENGTH,
  matches,
  type PreparedActivation,
  prepareActivation,
  referencedVariables,
  SPEC_VARIABLES,
  type SpecVariable,
  specEnvironment,
  specEnvironmentWith,
} from "./env.js";
export { formatIp, ipValue, netFunctions, netRegistry, parseCidr, parseIp, parsePeerIp, peerIpValue } from "./net.js";
export { MAX_REPLACE_RESULT, replaceLinear, specStrings } from "./strings.js";
export { fromCel, toCel } from "./values.js";
