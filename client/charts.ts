/**
 * Live line charts on uPlot (fast, small, canvas-based): the shared loss curve on both pages
 * and the accuracy curve on the teacher's. The chart follows its container's width, so it
 * fits a 390 px phone and a projector alike.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Series {
  label: string;
  stroke: string;
  /** Formats a value for the legend. */
  format?: (v: number) => string;
  /** Draws a dot at every value: for sparse series such as one test accuracy per epoch. */
  points?: boolean;
}

export interface ChartOptions {
  /** Plot height in CSS px, read again on every resize (a projector mode may raise it). */
  height?: () => number;
}

export interface LiveChart {
  /** Replaces the data: x values (steps) and one array per series (null for a gap). */
  setData(x: number[], ys: Array<Array<number | null>>): void;
  /** Re-reads the container's width and the height option (after a layout change). */
  resize(): void;
  destroy(): void;
}

const CHART_HEIGHT_PX = 220;

export function createLiveChart(container: HTMLElement, title: string, series: Series[], xLabel = 'step', options: ChartOptions = {}): LiveChart {
  const width = () => Math.max(240, container.clientWidth);
  const height = options.height ?? (() => CHART_HEIGHT_PX);
  const plot = new uPlot(
    {
      title,
      width: width(),
      height: height(),
      scales: { x: { time: false } },
      axes: [{ label: xLabel }, {}],
      series: [
        { label: xLabel },
        ...series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, spanGaps: true, ...(s.points ? { points: { show: true, size: 8, fill: s.stroke } } : {}), value: (_u: uPlot, v: number | null) => (v === null ? '–' : (s.format ?? ((x: number) => x.toFixed(3)))(v)) })),
      ],
    },
    [[], ...series.map(() => [])],
    container,
  );
  const fit = () => plot.setSize({ width: width(), height: height() });
  const resize = new ResizeObserver(fit);
  resize.observe(container);
  return {
    setData(x, ys) {
      plot.setData([x, ...ys] as uPlot.AlignedData);
    },
    resize: fit,
    destroy() {
      resize.disconnect();
      plot.destroy();
    },
  };
}
