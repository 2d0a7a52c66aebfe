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
}

export interface LiveChart {
  /** Replaces the data: x values (steps) and one array per series (null for a gap). */
  setData(x: number[], ys: Array<Array<number | null>>): void;
  destroy(): void;
}

const CHART_HEIGHT_PX = 220;

export function createLiveChart(container: HTMLElement, title: string, series: Series[], xLabel = 'step'): LiveChart {
  const width = () => Math.max(240, container.clientWidth);
  const plot = new uPlot(
    {
      title,
      width: width(),
      height: CHART_HEIGHT_PX,
      scales: { x: { time: false } },
      axes: [{ label: xLabel }, {}],
      series: [
        { label: xLabel },
        ...series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, spanGaps: true, value: (_u: uPlot, v: number | null) => (v === null ? '–' : (s.format ?? ((x: number) => x.toFixed(3)))(v)) })),
      ],
    },
    [[], ...series.map(() => [])],
    container,
  );
  const resize = new ResizeObserver(() => plot.setSize({ width: width(), height: CHART_HEIGHT_PX }));
  resize.observe(container);
  return {
    setData(x, ys) {
      plot.setData([x, ...ys] as uPlot.AlignedData);
    },
    destroy() {
      resize.disconnect();
      plot.destroy();
    },
  };
}
