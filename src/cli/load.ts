// Loading a file set and translating it: shared by translate, status, serve and run.

import { FileSource, type LoadResult } from "../sources/file-source.js";
import { makeInput } from "../translate/input.js";
import { type TranslateOptions, type TranslationResult, translate } from "../translate/translate.js";

export interface Loaded {
  readonly load: LoadResult;
  readonly result: TranslationResult;
}

export function translateLoad(
  load: LoadResult,
  opts: Omit<TranslateOptions, "impliedGatewayClass"> = {},
): TranslationResult {
  return translate(
    makeInput(load.resources, () => load.sources, load.invalid),
    { ...opts, impliedGatewayClass: true },
  );
}

export async function loadAndTranslate(paths: readonly string[]): Promise<Loaded> {
  const load = await new FileSource(paths).load();
  return { load, result: translateLoad(load) };
}
