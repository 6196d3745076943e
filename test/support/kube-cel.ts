// The Kubernetes CEL library functions Sluice's CRD rules use beyond standard CEL, for evaluating those rules with
// @bufbuild/cel in unit tests: isQuantity(), quantity() and Quantity.compareTo(). A quantity is modelled as its value
// in a double, which is exact for the byte sizes the rules compare (whole numbers below 2^53). The real library is
// exercised by test/e2e/kube-crds.test.ts against a kube-apiserver.

import { CelScalar, celFunc, celMethod, type run } from "@bufbuild/cel";
import { byteQuantity } from "../../src/api/common.js";

function quantity(s: string): number {
  const n = byteQuantity(s);
  if (n === undefined) throw new Error(`quantities must match the regular expression: ${s}`);
  return n;
}

export const KUBE_CEL: NonNullable<Parameters<typeof run>[2]> = {
  funcs: [
    celFunc("isQuantity", [CelScalar.STRING], CelScalar.BOOL, (s) => byteQuantity(s) !== undefined),
    celFunc("quantity", [CelScalar.STRING], CelScalar.DOUBLE, (s) => quantity(s)),
    celMethod("compareTo", CelScalar.DOUBLE, [CelScalar.DOUBLE], CelScalar.INT, function (other) {
      return BigInt(Math.sign((this as number) - other));
    }),
  ],
};
