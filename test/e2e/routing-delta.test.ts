import { routingSuite } from "./routing-suite.js";

routingSuite(true);
