/** Each test starts on a fresh page: nothing remembered of the runs an earlier test showed. */
import { beforeEach } from "vitest";
import { forgetFolds } from "../src/view/folds";

beforeEach(forgetFolds);
